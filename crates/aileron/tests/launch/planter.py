#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, tries to leave something behind that
would run later as the user (the re-attack's H4: `aileron approval approve <id>` appended to
~/.bashrc approved the agent's own requests at the user's next shell), and checks that what an
agent needs to write still works. Every outcome goes into one JSON object in $PLANT_REPORT.

Driven by crates/aileron/tests/it/launch.rs (`a_launched_agent_writes_only_its_allow_list`).
"""

import json
import os
import subprocess
import time

home = os.path.expanduser("~")
workspace = os.getcwd()
report = {}


def attempt(name, action):
    try:
        action()
        report[name] = "written"
    except OSError as error:
        report[name] = f"refused: {error.strerror}"


def append(path, text):
    def write():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as handle:
            handle.write(text)
    return write


def run(*argv):
    def go():
        done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(done.returncode, (done.stderr or done.stdout).strip()[-300:])
    return go


def planted(path, text):
    """Plants `path` (through a temp name and a rename when `text` says so) and reports whether
    it was moved out of the repository while the agent still ran: the user's own git, in another
    terminal, must never read it."""
    def plant():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        staging = path + ".staged" if text.startswith("rename:") else path
        with open(staging, "w") as handle:
            handle.write(text.removeprefix("rename:"))
        if staging != path:
            os.rename(staging, path)
        for _ in range(400):
            if not os.path.lexists(path):
                return
            time.sleep(0.025)
        raise OSError(0, "left in place")
    return plant


def evil_common_dir():
    """A directory git would take for the repository's common directory: its objects and refs,
    with a config whose fsmonitor runs at the user's next `git status`."""
    evil = f"{workspace}/evil-common"
    os.makedirs(evil, exist_ok=True)
    with open(f"{evil}/config", "w") as handle:
        handle.write(f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {os.environ['FSMONITOR_MARKER']}\n")
    for name in ["objects", "refs"]:
        if not os.path.lexists(f"{evil}/{name}"):
            os.symlink(f"{workspace}/.git/{name}", f"{evil}/{name}")
    return evil


fsmonitor = f"[core]\n\tfsmonitor = touch {os.environ['FSMONITOR_MARKER']}\n"
approve = "aileron approval approve act-planted\n"
# Places that run as the user later.
attempt("bashrc", append(f"{home}/.bashrc", approve))
attempt("profile", append(f"{home}/.profile", approve))
attempt("bash_profile", append(f"{home}/.bash_profile", approve))
attempt("zshrc", append(f"{home}/.zshrc", approve))
attempt("local_bin_aileron", append(f"{home}/.local/bin/aileron", "#!/bin/sh\n" + approve))
attempt("cargo_bin_xdg_open", append(f"{home}/.cargo/bin/xdg-open", "#!/bin/sh\n" + approve))
attempt("autostart", append(f"{home}/.config/autostart/evil.desktop", "[Desktop Entry]\nExec=sh -c 'x'\n"))
attempt("systemd_unit", append(f"{home}/.config/systemd/user/evil.service", "[Service]\nExecStart=/bin/true\n"))
attempt("git_hook", append(f"{workspace}/.git/hooks/pre-commit", "#!/bin/sh\n" + approve))
attempt("git_config", append(f"{workspace}/.git/config", "[core]\n\thooksPath = /tmp/evil-hooks\n"))
attempt("git_config_by_git", run("git", "config", "core.fsmonitor", "sh -c x"))
attempt("git_dir_renamed", lambda: os.rename(f"{workspace}/.git", f"{workspace}/.git-old"))
# The re-attack of 2026-12-05: git redirected to a config of the agent's, in the workspace's
# repository, its submodule and a repository nested in it.
attempt("git_commondir", planted(f"{workspace}/.git/commondir", evil_common_dir() + "\n"))
attempt("git_commondir_renamed_in", planted(f"{workspace}/.git/commondir", "rename:" + evil_common_dir() + "\n"))
attempt("git_config_worktree", planted(f"{workspace}/.git/config.worktree", fsmonitor))
attempt("git_included_config", planted(f"{workspace}/shared.gitconfig", fsmonitor))
attempt("module_hook", append(f"{workspace}/.git/modules/lib/hooks/post-checkout", "#!/bin/sh\n" + approve))
attempt("module_config", append(f"{workspace}/.git/modules/lib/config", fsmonitor))
attempt("module_commondir", planted(f"{workspace}/.git/modules/lib/commondir", evil_common_dir() + "\n"))
attempt("module_gitfile", append(f"{workspace}/lib/.git", "\ngitdir: " + evil_common_dir() + "\n"))
attempt("modules_renamed", lambda: os.rename(f"{workspace}/.git/modules", f"{workspace}/.git/modules-old"))
attempt("nested_hook", append(f"{workspace}/vendor/dep/.git/hooks/post-checkout", "#!/bin/sh\n" + approve))
attempt("nested_config", append(f"{workspace}/vendor/dep/.git/config", fsmonitor))
attempt("nested_parent_renamed", lambda: os.rename(f"{workspace}/vendor", f"{workspace}/vendor-old"))
attempt("nested_git_renamed", lambda: os.rename(f"{workspace}/vendor/dep/.git", f"{workspace}/vendor/dep/.git-old"))
attempt("new_repository", run("git", "init", "-q", "made-by-agent"))
# The second re-attack of 2026-12-05: hooks where `core.hooksPath` puts them (husky's `.husky/_`,
# which git ignores), a program the config names, an include's directory renamed away to put
# another in its place, and a repository recorded as a submodule where the launch's search does
# not look (node_modules): the user's `git status` at the root enters it.
attempt("hooks_path_hook", append(f"{workspace}/.husky/_/pre-commit", "#!/bin/sh\n" + approve))
attempt("hooks_path_renamed", lambda: os.rename(f"{workspace}/.husky", f"{workspace}/.husky-old"))
attempt("fsmonitor_program", append(f"{workspace}/tools/fsmonitor.sh", f"touch {os.environ['FSMONITOR_MARKER']}\n"))
attempt("include_dir_renamed", lambda: os.rename(f"{workspace}/conf", f"{workspace}/conf-old"))
attempt("include_replaced", append(f"{workspace}/conf/team.gitconfig", fsmonitor))


def hidden_submodule():
    path = f"{workspace}/node_modules/evil"
    run("git", "init", "-q", path)()
    with open(f"{path}/.git/config", "a") as handle:
        handle.write(fsmonitor)
    with open(f"{path}/.git/hooks/post-checkout", "w") as handle:
        handle.write("#!/bin/sh\n" + approve)
    cached = "160000,0123456789abcdef0123456789abcdef01234567,node_modules/evil"
    run("git", "update-index", "--add", "--cacheinfo", cached)()


attempt("hidden_submodule", hidden_submodule)
# The third re-attack: husky's own scripts (its stubs in `.husky/_` run them), and a submodule
# whose `.git` is a link into the agent's own directory and whose config begins with a
# byte-order mark (git skips it).
attempt("husky_script", append(f"{workspace}/.husky/pre-commit", approve))


def linked_submodule():
    elsewhere = f"{home}/.claude/evil-linked"
    run("git", "init", "-q", elsewhere)()
    with open(f"{elsewhere}/.git/config", encoding="utf-8") as handle:
        config = handle.read()
    with open(f"{elsewhere}/.git/config", "w", encoding="utf-8") as handle:
        handle.write("\ufeff" + config + fsmonitor)
    os.makedirs(f"{workspace}/node_modules/linked")
    os.symlink(f"{elsewhere}/.git", f"{workspace}/node_modules/linked/.git")
    cached = "160000,0123456789abcdef0123456789abcdef01234567,node_modules/linked"
    run("git", "update-index", "--add", "--cacheinfo", cached)()


attempt("linked_submodule", linked_submodule)


def make_bare(path):
    """`path` made to look like a bare repository to git: HEAD beside objects and refs."""
    for name in ["objects", "refs"]:
        os.makedirs(f"{path}/{name}", exist_ok=True)
    with open(f"{path}/HEAD", "w") as handle:
        handle.write("ref: refs/heads/main\n")


# The fourth re-attack: a directory made to look like a bare repository (git takes it for the
# repository of every directory below it and reads its config; its pager runs at `git log`).
def bare_lookalike():
    make_bare(f"{workspace}/src")
    with open(f"{workspace}/src/config", "w") as handle:
        handle.write(f"[core]\n\tpager = touch {os.environ['FSMONITOR_MARKER']}\n")


attempt("bare_lookalike", bare_lookalike)


# The fifth re-attack: a repository whose `hooks` is a link to the user's own directory, for the
# launcher (the user) to empty when it disarms the repository at the exit.
def hooks_linked_out():
    make_bare(f"{workspace}/lure")
    os.symlink(os.environ["PRECIOUS_DIR"], f"{workspace}/lure/hooks")


attempt("hooks_linked_out", hooks_linked_out)


# The sixth re-attack: a new submodule whose `.git` is a link to the user's own `.git`, for the
# launcher to disarm (move the user's config and hooks) at the exit.
def link_to_the_users_git():
    os.makedirs(f"{workspace}/mirror")
    os.symlink("../.git", f"{workspace}/mirror/.git")
    cached = "160000,0123456789abcdef0123456789abcdef01234567,mirror"
    run("git", "update-index", "--add", "--cacheinfo", cached)()


attempt("link_to_the_users_git", link_to_the_users_git)
# Modes, times and extended attributes outside the write list (Landlock does not cover them):
# `~/.bashrc` made writable to every other user is one planted line away.
attempt("chmod_outside", lambda: os.chmod(f"{home}/.bashrc", 0o666))
attempt("utime_outside", lambda: os.utime(f"{home}/.bashrc", (0, 0)))
attempt("xattr_outside", lambda: os.setxattr(f"{home}/.bashrc", "user.aileron", b"planted"))
attempt("dev_entry", append(os.environ["DEV_ENTRY"], "planted in the host's /dev\n"))
attempt("dev_shm", append(os.environ["SHM_PATH"], "left for the user's other programs\n"))
attempt("outside_everything", append(os.environ["OUTSIDE_PATH"], "x"))
# What an agent needs.
attempt("workspace_file", append(f"{workspace}/notes.txt", "written by the agent\n"))
attempt("relative_file", append("./relative.txt", "written by the agent\n"))
attempt("own_script_executable", lambda: os.chmod(f"{workspace}/notes.txt", 0o755))
attempt("git_commit", run("git", "-c", "user.name=Agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "--allow-empty", "-m", "agent"))
attempt("own_state", append(f"{home}/.claude/state.json", "{}"))
attempt("temp_dir", append(f"{os.environ['TMPDIR']}/scratch", "x"))
attempt("dev_null", append("/dev/null", "x"))
attempt("extra_writable", append(os.environ["EXTRA_PATH"] + "/granted.txt", "x"))

# Last (a commit would write the index back as a file): the index behind a link, which git follows.
def index_behind_a_link():
    os.rename(f"{workspace}/.git/index", f"{workspace}/.git/index.real")
    os.symlink("index.real", f"{workspace}/.git/index")


attempt("index_behind_a_link", index_behind_a_link)

with open(os.environ["PLANT_REPORT"], "w") as handle:
    json.dump(report, handle)
