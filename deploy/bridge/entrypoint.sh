#!/bin/bash
# Source ROS 2 so rclpy imports, then run the bridge commands (bridge, sim-robot, bag ...).
set -e
source /opt/ros/jazzy/setup.bash
exec python3 -m robot_bridge "$@"
