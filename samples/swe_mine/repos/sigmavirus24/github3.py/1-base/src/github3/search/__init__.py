from .search import SearchIterator
