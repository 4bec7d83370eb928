"""Post-processing shared by the privacy models. No private data enters here: every function
takes noisy measurements (and public structure) and returns estimates.
"""
