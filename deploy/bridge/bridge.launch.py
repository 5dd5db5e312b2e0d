"""ros2 launch deploy/bridge/bridge.launch.py profile:=/app/configs/robot_profiles/sim_arm.yaml run:=/runs/arm

Starts the WorldSample bridge (rclpy transport) as a managed process next to the robot's own
nodes; `sim:=true` also starts the simulated arm (over DDS, with rmw_cyclonedds on the wire).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration


def generate_launch_description() -> LaunchDescription:
    profile = LaunchConfiguration("profile")
    run = LaunchConfiguration("run")
    cmd = ["python3", "-m", "robot_bridge"]
    return LaunchDescription([
        DeclareLaunchArgument("profile", default_value="/app/configs/robot_profiles/sim_arm.yaml"),
        DeclareLaunchArgument("run", default_value="/runs/arm"),
        DeclareLaunchArgument("sim", default_value="false", description="also run the simulated arm"),
        ExecuteProcess(cmd=[*cmd, "bridge", "--profile", profile, "--run", run, "--transport", "rclpy"],
                       name="worldsample_bridge", output="screen", sigterm_timeout="10"),
        ExecuteProcess(cmd=[*cmd, "sim-robot", "--profile", profile], name="worldsample_sim_robot",
                       output="screen", condition=IfCondition(LaunchConfiguration("sim"))),
    ])
