"""A bag received from elsewhere is read, never obeyed: split names in its
``metadata.yaml`` or its split index never become paths outside the bag,
malformed fields are named (file and field) and the bag is skipped while the
rest of the batch is audited, and a malformed index line is left out, never
written back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from test_recording import _stale_metadata_bag

from safemanip_ros.bag.metadata import BagMetadataError, split_file_name
from safemanip_ros.bag.reader import open_bag
from safemanip_ros.bag.writer import INDEX_NAME, write_metadata

SCENE = REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'


def _info(bag: Path) -> dict:
    import yaml
    return yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']


def _links_outside(root: Path) -> list[Path]:
    return [p for p in root.rglob('*') if p.is_symlink()]


@pytest.mark.parametrize('name', ['../x.mcap', '../../../tmp/planted.mcap', '/etc/x.mcap', '..', '', 'a\\..\\b.mcap'])
def test_a_split_name_outside_the_bag_is_refused_and_plants_nothing(tmp_path, name):
    bag = tmp_path / 'inbox' / 'bag'
    bag.parent.mkdir()
    _stale_metadata_bag(bag)                  # metadata lists 3 of 5 splits: reading goes through the split view
    info = _info(bag)
    info['relative_file_paths'][0] = name
    write_metadata(bag, info)
    before = set(tmp_path.rglob('*'))
    with pytest.raises(BagMetadataError, match=r"metadata\.yaml: relative_file_paths\[0\]: .* is not a file name "
                                               r"inside the bag"):
        with open_bag(bag):
            pass
    assert set(tmp_path.rglob('*')) == before and not _links_outside(tmp_path)


def test_folder_prefixed_split_names_are_read_as_rosbags_reads_them(tmp_path):
    """Older rosbag2 wrote ``<bag>/<bag>_0.db3``: the last part names the file in the bag."""
    assert split_file_name('rosbag2_x/rosbag2_x_0.db3') == 'rosbag2_x_0.db3'
    bag = tmp_path / 'bag'
    sent = _stale_metadata_bag(bag)
    info = _info(bag)
    info['relative_file_paths'] = [f'bag/{n}' for n in info['relative_file_paths']]
    for f in info['files']:
        f['path'] = f'bag/{f["path"]}'
    write_metadata(bag, info)
    with open_bag(bag) as b:
        assert sum(1 for _ in b.messages(b.connections)) == sent


@pytest.mark.parametrize('field, value, words', [
    ('relative_file_paths', 'abc.mcap', 'relative_file_paths: expected a list of split file names'),
    ('message_count', -5, 'message_count: expected a count >= 0'),
    ('topics_with_message_count', 'xyz', 'topics_with_message_count: expected a list'),
    ('files', [{'path': '../evil.mcap'}], "files[0].path: '../evil.mcap' is not a file name inside the bag"),
    ('duration', {'nanoseconds': 'long'}, 'duration.nanoseconds: expected an integer >= 0'),
])
def test_malformed_metadata_is_named_and_the_rest_of_the_batch_is_audited(tmp_path, field, value, words):
    inbox = tmp_path / 'inbox'
    good, bad = inbox / 'good', inbox / 'bad'
    inbox.mkdir()
    _stale_metadata_bag(good)
    _stale_metadata_bag(bad)
    info = _info(bad)
    info[field] = value
    write_metadata(bad, info)
    out = tmp_path / 'audit'
    proc = run_cli('audit', str(inbox), '--scene', str(SCENE), '--only', 'reach_in_fixture_only_when_fully_open',
                   '--out', str(out), '--quiet', timeout=600)
    assert 'internal error' not in proc.stderr and 'Traceback' not in proc.stderr, proc.stderr
    report = json.loads((out / 'report.json').read_text())
    assert [e['source'] for e in report['episodes']] and all('good' in e['source'] for e in report['episodes'])
    skipped = [json.loads(p.read_text()) for p in (out / 'skipped').glob('*.json')]
    assert len(skipped) == 1 and 'bad' in skipped[0]['source'], skipped
    assert f'{bad / "metadata.yaml"}: {words}' in skipped[0]['reason'], skipped[0]['reason']
    assert not _links_outside(tmp_path)


def test_a_malformed_index_line_is_left_out_and_never_written_back(tmp_path):
    bag = tmp_path / 'bag'
    _stale_metadata_bag(bag)
    lines = (bag / INDEX_NAME).read_text().splitlines()
    fourth = json.loads(lines[3])
    fourth['message_count'] = -1000             # a hostile count for split 4
    lines[3] = json.dumps(fourth)
    lines[4] = json.dumps(dict(json.loads(lines[4]), file=dict(json.loads(lines[4])['file'], path='../x.mcap')))
    (bag / INDEX_NAME).write_text('\n'.join(lines) + '\n')
    proc = run_cli('bag', 'repair', str(bag))
    assert proc.returncode == 0, proc.stderr
    assert 'listed again 0 split(s)' in proc.stdout, proc.stdout
    assert f'malformed lines of {INDEX_NAME} left out: line 4: message_count is not a count >= 0; ' \
           'line 5: file.path is not a file name inside the bag' in proc.stdout, proc.stdout
    info = _info(bag)
    assert info['message_count'] >= 0 and len(info['relative_file_paths']) == 3
    assert not _links_outside(tmp_path) and not (tmp_path / 'x.mcap').exists()
    assert os.access(bag / 'metadata.yaml', os.R_OK)
