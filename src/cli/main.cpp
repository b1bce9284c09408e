// tessera <command>: dispatch only; each command lives in its own file.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  std::fprintf(stderr, "usage: tessera <command> [options]\n");
  return argc > 1 ? 1 : 0;
}
