#include "common/clock.h"

namespace normsweep {

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace normsweep
