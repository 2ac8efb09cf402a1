// The client's clock (client_mux.h, ClientClock): the start and end of a record forwarded to
// another CUPTI client, moved from CUPTI's clock (traintime's, while it captures) to the one the
// client registered, along a line through the reading taken at its registration and one taken now.
#pragma once

#include <cstddef>
#include <cstdint>

#include "client_mux.h"

namespace traintime::cupti {

class ClockLine {
 public:
  // The line from the registration's reading to a reading of both clocks now; false when CUPTI's
  // clock cannot be read (the records then keep CUPTI's clock).
  bool measure(const CuptiLibrary& lib, const ClientClock& clock);
  // One copied record's start and end (one timestamp: once), when its kind's layout is known and
  // they lie within its `bytes`; other records are left as they are.
  void convert(uint8_t* record, size_t bytes) const;
  // A CUPTI timestamp on the client's clock; 0 (untimed) stays 0.
  uint64_t at(uint64_t t) const;

 private:
  uint64_t cupti1_ = 0, client1_ = 0;
  long double rate_ = 1.0L;  // client ticks per CUPTI nanosecond
};

}  // namespace traintime::cupti
