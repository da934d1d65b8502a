#include "corruption_tally.h"

#include <iomanip>
#include <sstream>

namespace dcpp::corruption {

namespace {

void count(Outcome& o, bool verify_detected, bool verify_named, bool load_detected, bool load_named,
           bool crashed) {
  ++o.trials;
  o.verify_detected += verify_detected;
  o.verify_named += verify_named;
  o.load_detected += load_detected;
  o.load_named += load_named;
  o.crashes += crashed;
}

std::string fraction(int n, int of) {
  std::ostringstream s;
  s << n << " (" << std::fixed << std::setprecision(1) << (of == 0 ? 0.0 : 100.0 * n / of) << "%)";
  return s.str();
}

void row(std::ostream& out, const std::string& label, const Outcome& o) {
  out << "| " << label << " | " << o.trials << " | " << fraction(o.verify_detected, o.trials)
      << " | " << fraction(o.verify_named, o.trials) << " | " << fraction(o.load_detected, o.trials)
      << " | " << fraction(o.load_named, o.trials) << " | " << o.crashes << " |\n";
}

}  // namespace

void Tally::add(const std::string& group, const std::string& label, bool verify_detected,
                bool verify_named, bool load_detected, bool load_named, bool crashed) {
  count(groups_[group][label], verify_detected, verify_named, load_detected, load_named, crashed);
  if (group == "file kind") {
    count(total_, verify_detected, verify_named, load_detected, load_named, crashed);
  }
}

void Tally::print(std::ostream& out) const {
  for (const auto& [group, labels] : groups_) {
    out << "\n| " << group
        << " | trials | verify: detected | verify: named file (and key) | load: detected | "
           "load: named file (and key) | crashes |\n|---|---|---|---|---|---|---|\n";
    for (const auto& [label, outcome] : labels) {
      row(out, label, outcome);
    }
    row(out, "**all**", total_);
  }
}

}  // namespace dcpp::corruption
