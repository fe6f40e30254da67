"""Sample repositories for the SWE environments (tests and the image-cache benchmark)."""
