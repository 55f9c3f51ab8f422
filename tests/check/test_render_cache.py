"""The render cache Helm's renders and the chart-value trials are kept in (fabctl.helm.RenderCache): shared by the
threads of one check and by the processes of a test session, and never in the way of a check."""

from __future__ import annotations

import threading

from fabctl.helm import RenderCache


def test_a_value_read_while_threads_write_it_is_whole():
    """The check tries releases side by side: a reader sees nothing or one writer's value, never part of one."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        cache = RenderCache(Path(folder))
        values = [[f"writer {n}"] * 20_000 for n in range(4)]
        seen: list[object] = []

        def write(value: list[str]) -> None:
            for _ in range(20):
                cache.put("template", "key", value)

        def read() -> None:
            for _ in range(200):
                seen.append(cache.get("template", "key"))

        threads = [threading.Thread(target=write, args=(v,)) for v in values] + [threading.Thread(target=read) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(value is None or value in values for value in seen)
        assert cache.get("template", "key") in values
        assert [p.name for p in (Path(folder) / "template").iterdir()] == ["key.json"]  # no partial file left behind


def test_a_folder_that_cannot_be_written_keeps_nothing_and_says_so_once(tmp_path, capsys):
    (tmp_path / "renders").write_text("a file where the cache folder should be")
    cache = RenderCache(tmp_path / "renders")
    for n in range(2):
        cache.put("template", f"key-{n}", ["a render"])
    assert (cache.get("template", "key-0"), capsys.readouterr().err) == (None, (
        f"warning: Helm's renders are not kept: the render cache {tmp_path / 'renders'} cannot be used (not a folder); "
        "name another with --render-cache DIR or FAB_CACHE_DIR\n"))
