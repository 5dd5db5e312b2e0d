"""Exports of stored episodes to other tools' formats, and imports from them (docs/store.md).

foxglove        one episode as an MCAP file with Foxglove's schemas (`export_episode`, `write_episode`)
video           one episode's cameras as an mp4 (`export_episode_mp4`); mp4 writing and reading with PyAV
lerobot_write   a group as a LeRobotDataset v3.0 directory (`export_lerobot`, `write_lerobot`)
lerobot_read    a LeRobotDataset v3.0 directory checked and read episode by episode (`open_dataset`)
lerobot_import  a LeRobotDataset v3.0 into a run's `demo` group, all or nothing (`import_lerobot`)
lerobot_format  the v3.0 layout and the map between store keys and LeRobot feature names
blocks          an episode read a time-chunk at a time against its checksums

Importing this package loads no exporter's SDK, pyarrow or PyAV; the functions that need one import it.
"""
