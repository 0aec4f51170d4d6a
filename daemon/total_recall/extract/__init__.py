"""Extraction: the LLM protocol, the offline extractor and the LLM client."""
