"""LeRobotDataset v3.0: the file layout and how store keys and LeRobot feature names map.

    meta/info.json                              codebase_version "v3.0", fps, features, path templates
    meta/stats.json                             min, max, mean, std, count of each feature
    meta/tasks.parquet                          task (the pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet    one row per episode: length, tasks, where its rows and
                                                frames are (data/..., videos/<key>/..., dataset_from/to_index)
    data/chunk-000/file-000.parquet             one row per frame
    videos/<feature>/chunk-000/file-000.mp4     every episode's frames of one camera, back to back
    meta/worldsample.json                       this exporter's own: the group's schema, the key map and
                                                the commit records (LeRobot does not read it)

Store key -> feature: image_<camera> -> observation.images.<camera>, proprio -> observation.state,
state (the simulator's task state) -> observation.environment_state, any other observation key K ->
observation.K, action -> action, reward -> next.reward, done -> next.done, success -> next.success,
intervention -> complementary_info.is_intervention.
"""

from __future__ import annotations

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk directory (LeRobot's default)
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 500
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
SIDECAR_PATH = "meta/worldsample.json"
SIDECAR_FORMAT = "worldsample-lerobot"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"

# columns every v3 dataset has, besides its features (LeRobot's DEFAULT_FEATURES)
INDEX_FEATURES = {
    "timestamp": "float32",
    "frame_index": "int64",
    "episode_index": "int64",
    "index": "int64",
    "task_index": "int64",
}
IMAGE_PREFIX = "observation.images."
STEP_FEATURES = {
    "action": "action",
    "reward": "next.reward",
    "done": "next.done",
    "success": "next.success",
    "intervention": "complementary_info.is_intervention",
}
OBS_FEATURES = {"proprio": "observation.state", "state": "observation.environment_state"}


def feature_name(key: str, image: bool) -> str:
    """The LeRobot feature a store key is exported as."""
    if image:
        return IMAGE_PREFIX + key.removeprefix("image_")
    return STEP_FEATURES.get(key) or OBS_FEATURES.get(key) or f"observation.{key}"


def store_key(feature: str, image: bool) -> str | None:
    """The store key a LeRobot feature is imported as; None for a feature the store has no place
    for (neither an observation nor a step key)."""
    if image:
        camera = feature.removeprefix(IMAGE_PREFIX).removeprefix("observation.")
        return "image_" + camera.replace(".", "_")
    for table in (STEP_FEATURES, OBS_FEATURES):
        for k, f in table.items():
            if f == feature:
                return k
    if feature.startswith("observation."):
        return feature.removeprefix("observation.").replace(".", "_")
    return None
