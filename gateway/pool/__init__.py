"""Many models behind one gateway: a models file, one supervised worker per model, loaded on demand and evicted under a budget."""
