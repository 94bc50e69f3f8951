"""The float MoE language model: its definition, corpus, vocabulary, training, checkpoints
(bundled, pruned, Hugging Face) and the bundled prompts."""
