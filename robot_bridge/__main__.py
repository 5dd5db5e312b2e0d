"""`python -m robot_bridge`: the robot side's command line (bridge, sim-robot, bag), for the robot-PC
image where the `worldsample` learner and services are not needed."""

from robot_bridge.cli import app

if __name__ == "__main__":
    app(prog_name="python -m robot_bridge")
