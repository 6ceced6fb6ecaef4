"""Classifier backends: each answers a yes/no question about one email with a confidence.

``base`` holds the plain data they exchange; ``builtin`` learns locally (scikit-learn), ``openai``
asks an OpenAI-compatible chat-completions server. ``labels.services`` picks one per settings.
"""
