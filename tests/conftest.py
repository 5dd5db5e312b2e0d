import os

# headless rendering for every test that touches MuJoCo
os.environ.setdefault("MUJOCO_GL", "egl")
