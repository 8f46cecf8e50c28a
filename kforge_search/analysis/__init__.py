"""Performance analysis: the work a problem does, the rule-based digest and
recommendations, and the roofline/timeline image (the analysis agent's inputs)."""
