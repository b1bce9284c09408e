# The arguments every benchmark script shares, sourced first:
#   bench_help_or_go_on "$@"   -h / --help prints the script's opening comment (its usage) and exits 0;
#                              another first argument starting with '-' is refused (exit 2): the scripts
#                              take the build directory first, and a mistyped option must not be taken
#                              for one and start minutes of work.
#   BUILD=$(bench_build_dir "${1:-build}")   the build directory, absolute; exit 2 with what to do when
#                              it holds no tessera binary.
bench_help_or_go_on() {
  case "${1:-}" in
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "$(basename "$0"): unknown option '$1' (the first argument is the build directory; --help for the usage)" >&2
      exit 2
      ;;
  esac
}

bench_build_dir() {
  if [[ ! -x $1/src/cli/tessera ]]; then
    echo "$(basename "$0"): no tessera binary at '$1/src/cli/tessera': build first (scripts/build.sh, or cmake --build $1), or give the build directory as the first argument" >&2
    exit 2
  fi
  (cd "$1" && pwd)
}
