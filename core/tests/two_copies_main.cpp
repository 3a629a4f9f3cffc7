// Loads two shared libraries that each bundle dlock (two_copies_plugin.cpp): the process
// must start, and both copies must open providers.
#include <cstdio>

extern "C" int dlock_plugin_a();
extern "C" int dlock_plugin_b();

int main() {
  const int a = dlock_plugin_a();
  const int b = dlock_plugin_b();
  std::printf("plugin a took its lock: %d, plugin b: %d\n", a, b);
  return a == 1 && b == 1 ? 0 : 1;
}
