"""Tokenizers for placement with text or chat (SPEC 16.2).

``files`` names the Hugging Face files a tokenizer is made of and checks
their digests; ``store`` keeps the files agents offer, once by content, and
answers which complete sets the pool holds (``agent_sets``), their bytes
(``file_bytes``) and a cheap marker of any change (``changed_marker``) that
each web process polls to load a new tokenizer within 5 s.
"""
