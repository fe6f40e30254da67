"""Man pages from Debian packages as documents: fetched with apt's client, rendered from roff."""
