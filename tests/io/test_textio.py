"""minibert.io.textio: the one text-reading policy (strict UTF-8, one message naming the spot)."""
import pytest

from minibert.io import textio

LATIN1 = "caf\u00e9 au lait\n"  # é is the single byte 0xe9 in Latin-1, two bytes in UTF-8


@pytest.fixture()
def latin1_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"first line\n\n" + "na\u00efve\n".encode("utf-8") + LATIN1.encode("latin-1"))
    return path


EXPECTED = (r"corpus.txt line 4: invalid UTF-8 byte 0xe9 at column 4; minibert reads text as "
            r"UTF-8 \(convert with iconv -f latin1 -t utf-8\)$")


def test_read_text_names_file_line_column_and_byte(latin1_file):
    with pytest.raises(ValueError, match=EXPECTED):
        textio.read_text(latin1_file)


def test_iter_lines_names_the_same_spot_and_yields_the_good_lines_first(latin1_file):
    lines = []
    with pytest.raises(ValueError, match=EXPECTED):
        for line in textio.iter_lines(latin1_file):
            lines.append(line)
    assert lines == ["first line\n", "\n", "na\u00efve\n"]


def test_column_counts_characters_not_bytes(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\u00e9t\u00e9 ".encode("utf-8") + b"\xff\n")  # 'été ' is 6 bytes, 4 characters
    for read in (textio.read_text, lambda p: list(textio.iter_lines(p))):
        with pytest.raises(ValueError, match=r"t.txt line 1: invalid UTF-8 byte 0xff at column 5"):
            read(path)


def test_a_multibyte_character_cut_at_the_end_of_the_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"ok\nab\xe2\x82")  # the first two bytes of the euro sign, then EOF
    with pytest.raises(ValueError, match=r"line 2: invalid UTF-8 byte 0xe2 at column 3"):
        textio.read_text(path)


def test_valid_text_is_unchanged_except_a_leading_bom(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbf" + "caf\u00e9\r\nb\u2028c\n\nlast".encode("utf-8"))
    assert textio.read_text(path) == "caf\u00e9\r\nb\u2028c\n\nlast"
    assert list(textio.iter_lines(path)) == ["caf\u00e9\r\n", "b\u2028c\n", "\n", "last"]  # "\n" only


def test_missing_file_and_directory_are_os_errors_naming_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"cannot read .*nope.txt: No such file"):
        textio.read_text(tmp_path / "nope.txt")
    with pytest.raises(IsADirectoryError, match=r"cannot read .*: Is a directory"):
        list(textio.iter_lines(tmp_path))


def test_check_argument_reports_undecodable_command_line_bytes():
    assert textio.check_argument("caf\u00e9") == "caf\u00e9"
    arg = b"the caf\xe9".decode("utf-8", errors="surrogateescape")  # what Python makes of argv
    with pytest.raises(ValueError, match=r"--pair: invalid UTF-8 byte 0xe9 at column 8"):
        textio.check_argument(arg, "--pair")
