"""The dashboard's live version (``server.next_version``): views redraw when the store's newest row moves and
once more when it has stopped moving, so a page ends on what the store holds even if a redraw was lost."""

from dash import no_update

from adaptune.dashboard.server import next_version


def test_views_redraw_when_rows_arrive_and_once_more_when_they_stop():
    first = next_version(None, 7)
    assert first == {"id": 7, "settled": True}  # the page's views were just drawn: nothing to redraw
    assert next_version(first, 7) is no_update
    moved = next_version(first, 9)
    assert moved == {"id": 9, "settled": False}  # a redraw
    moved = next_version(moved, 12)
    assert moved == {"id": 12, "settled": False}  # another (the last of them may be lost)
    settled = next_version(moved, 12)
    assert settled == {"id": 12, "settled": True}  # the one after the writes stopped
    assert next_version(settled, 12) is no_update  # and then quiet
    assert next_version(12, 12) == {"id": 12, "settled": True}  # an older page's plain id counts as a first poll
