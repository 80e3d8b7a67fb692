"""CI runs the README's set-up commands word for word, so a README that a new user follows
is the one that CI proved on a fresh virtual environment."""
import re

from tools.tests.helpers import REPO_ROOT


def _setup_commands() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)]


def test_readme_has_the_two_setup_commands():
    commands = _setup_commands()
    assert len(commands) == 2, commands
    assert "openhlo run examples/hello.mlir" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_commands_verbatim():
    ci_lines = {line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()}
    install_main, test_command = _setup_commands()
    assert install_main in ci_lines
    # The test command is split in CI into its install and its pytest step, each verbatim.
    install_test, pytest_command = (part.strip() for part in test_command.split("&&"))
    assert install_test in ci_lines
    assert any(line.endswith(pytest_command) for line in ci_lines), pytest_command
