#!/bin/sh
# Runs every fuzz target coverage-guided for SECONDS seconds each (default 60), one after the
# other, on one core. The working corpus grows in fuzz/corpus/<target> (ignored by git); the
# checked-in seeds in crates/aileron-fuzz/corpus/<target> are read, never written. Crashes land in
# fuzz/artifacts/<target>/. Works on the stable toolchain: `--sanitizer none` needs no -Z flag.
#
#   fuzz/run.sh                     # all targets, 60 s each
#   SECONDS_PER_TARGET=300 fuzz/run.sh manifest identity
set -eu
cd "$(dirname "$0")"
seconds=${SECONDS_PER_TARGET:-60}
all="action_file manifest identity package_tarball action_tarball guest_stdout guest_http_request guest_spawn
audit_log approvals_journal sessions_journal vault_file keyring mcp_message http_body agent_proxy_head egress_policy proxy_operation"
max_len() {
    case "$1" in
        identity) echo 256 ;;
        package_tarball | action_tarball | audit_log | approvals_journal) echo 8192 ;;
        *) echo 4096 ;;
    esac
}
for target in ${*:-$all}; do
    mkdir -p "corpus/$target"
    CARGO_BUILD_JOBS=1 cargo fuzz run --sanitizer none -a --target-dir target "$target" \
        "corpus/$target" "../crates/aileron-fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -max_len="$(max_len "$target")" -timeout=20 -rss_limit_mb=4096 \
        -close_fd_mask=3 -print_final_stats=1 2>&1 | tee "target/$target.log" | grep -E '^(#[0-9]+ +DONE|stat::|==|SUMMARY|Done)' || true
done
