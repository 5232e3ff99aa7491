"""Step logic: what each step Lambda does, independent of Lambda itself."""
