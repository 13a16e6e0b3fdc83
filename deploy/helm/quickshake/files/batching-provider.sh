# Sourced by bench/priority-ab and scripts/quickstart (not part of the packaged chart).
# batching_provider KEY_FILE [ENGINE] [INDENT]: prints batching-provider.yaml (next to this
# file, the quickshake.batching block's one copy) filled in with KEY_FILE, ENGINE (default
# auto) and the provider's defaults for the rest, as bench/bench.py fills it in, each line
# indented by INDENT spaces (default 0).
batching_provider() {
  local t pad
  t=$(<"${BASH_SOURCE[0]%/*}/batching-provider.yaml")
  t=${t//'${private_key}'/"{ filename: $1 }"}
  t=${t//'${fallback}'/false}
  t=${t//'${poll_delay}'/0.01s}
  t=${t//'${engine}'/"${2:-auto}"}
  t=${t//'${batching}'/budget}
  printf -v pad '%*s' "${3:-0}" ''
  while IFS= read -r line; do printf '%s%s\n' "$pad" "$line"; done <<<"$t"
}
