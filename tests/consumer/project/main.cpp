// Three steps, each with a "forward" and an "optimizer" region: what a user's annotated C++ loop
// looks like.
#include <traintime/traintime.h>

int main() {
  for (int step = 0; step < 3; ++step) {
    {
      TT_SCOPE("forward");
      TT_SCOPE_CATEGORY(TT_IO, "prefetch");
    }
    TT_PUSH_STATIC("optimizer");  // the C form: registered once, pushed by id
    tt_pop();
    tt_step(8, 1024);
  }
  return 0;
}
