"""kernels/README.md maps every kernel file and header to its chapter and role: a file added, moved
or removed without the map changing fails here."""
import re

from utils import REPO

KERNELS = REPO / "kernels"


def test_the_map_names_every_kernel_file_and_no_other():
    text = (KERNELS / "README.md").read_text()
    files = {p.relative_to(KERNELS).as_posix() for p in KERNELS.rglob("*") if p.suffix in (".cu", ".cuh")}
    rows = "\n".join(line for line in text.splitlines() if line.startswith("|"))  # the tables
    named = set(re.findall(r"`([\w/]+\.cuh?)`", rows))
    # the map names files of common/ by their bare name in its own table
    named |= {f"common/{n}" for n in named if (KERNELS / "common" / n).is_file()}
    assert files - named == set(), "kernels/README.md does not map these"
    assert {n for n in named if not (KERNELS / n).is_file() and not (KERNELS / "common" / n).is_file()} == set()


def test_probes_live_in_their_own_folder():
    assert not list(KERNELS.glob("*probe*.cu")), "a yardstick or probe belongs in kernels/probes/"
