/* The C API through pkg-config: three steps with a "backward" region each. */
#include <traintime/traintime.h>

int main(void) {
  for (int step = 0; step < 3; ++step) {
    tt_push("backward");
    tt_pop();
    tt_step(4, 0);
  }
  return 0;
}
