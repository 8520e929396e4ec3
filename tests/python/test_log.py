"""paddle_like.log writes the same line format as the C++ processes."""

import re

from paddle_like import log


def test_format_matches_the_cpp_format():
    # 2026-11-24T06:40:00.123Z, as paddle_like/core/log.h formats it.
    assert log.format_line(1795502400.123, "INFO", "trainer-3", "step 1\n") == \
        "2026-11-24T06:40:00.123Z INFO trainer-3: step 1\n"
    assert log.format_line(0, "ERROR", "master", "x") == "1970-01-01T00:00:00.000Z ERROR master: x\n"


def test_info_to_stdout_problems_to_stderr(capsys):
    log.set_process_name("trainer-9")
    log.info("registered")
    log.warning("slow")
    log.error("bad batch")
    out, err = capsys.readouterr()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO trainer-9: registered\n", out), out
    assert "WARNING trainer-9: slow\n" in err and "ERROR trainer-9: bad batch\n" in err and "INFO" not in err
    assert log.process_name() == "trainer-9"
