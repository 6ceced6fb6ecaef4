"""Labels: the rules engine, the classifier backends, /labels and /labels/test."""
