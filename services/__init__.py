"""Long-running processes that compose `worldsample` and `robot_bridge`: trainer and dashboard."""
