"""requests-toolbelt."""
__version__ = "0.8.0"
