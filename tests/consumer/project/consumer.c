/* The C API through pkg-config: three steps, each with a "backward" region holding a "layer"
 * region pushed by its registered id (TT_PUSH_STATIC), then a "fetch" region pushed by an id
 * registered by hand with an explicit category. */
#include <traintime/traintime.h>

int main(void) {
  const uint32_t fetch = tt_register_name("fetch", TT_IO);
  for (int step = 0; step < 3; ++step) {
    tt_push("backward");
    TT_PUSH_STATIC("layer");
    tt_pop();
    tt_pop();
    tt_push_id(fetch);
    tt_pop();
    tt_step(4, 0);
  }
  return 0;
}
