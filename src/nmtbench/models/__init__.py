"""Models behind one interface: recurrent and Transformer encoder-decoders, and their registry."""
