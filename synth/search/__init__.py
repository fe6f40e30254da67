"""Deep-search tasks: verified multi-hop questions over a document corpus and its link graph."""
