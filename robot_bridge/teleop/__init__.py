"""A person at the arm: the keyboard teleop (takeovers with hold-to-intervene, episode keys) and
demonstrations recorded through the bridge. See docs/teleop.md."""
