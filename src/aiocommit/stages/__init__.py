"""The stages of task and job commit: one small unit per stage."""
