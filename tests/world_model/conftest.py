import pytest
import torch

from tests.world_model.helpers import toy_store


@pytest.fixture(autouse=True)
def _two_threads():
    # the suite shares two cores with other jobs: a second thread mostly spins waiting for a core
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("toy")
    toy_store(path, episodes=15, length=24)
    return path
