"""The trainer service: Ray actors for the real-synthetic loop, driven by `worldsample train`."""
