// Step directories' names read back (plugin/src/step_names.h): exactly "step-" and 8 to 18
// digits, or Megatron-LM's "iter_" and 7 to 18.

#include "step_names.h"
#include "dcpp_test.h"

#include <dcpp/plugin/checkpoint_info.h>

using dcpp::detail::step_of_directory_name;

TEST_CASE("a step directory's name gives its step back; any other name none") {
  CHECK(step_of_directory_name("step-00001200") == 1200);
  CHECK(step_of_directory_name(dcpp::step_directory_name(7)) == 7);
  CHECK(step_of_directory_name(dcpp::step_directory_name(123456789012)) == 123456789012);
  CHECK(step_of_directory_name("step-999999999999999999") == 999999999999999999);
  CHECK_FALSE(step_of_directory_name("step-0000120"));              // 7 digits
  CHECK_FALSE(step_of_directory_name("step-9999999999999999999"));  // past an int64
  CHECK_FALSE(step_of_directory_name("step-00001200.incomplete"));
  CHECK_FALSE(step_of_directory_name("export-step-00001200"));
  CHECK_FALSE(step_of_directory_name("step-0000120x"));
  CHECK_FALSE(step_of_directory_name("step-00001200/"));
  CHECK_FALSE(step_of_directory_name(""));
}

TEST_CASE("Megatron-LM's step directories' names give their step back") {
  CHECK(step_of_directory_name("iter_0000100") == 100);
  CHECK(step_of_directory_name(dcpp::step_directory_name(7, dcpp::StepNames::kMegatronLM)) == 7);
  CHECK(step_of_directory_name("iter_123456789012") == 123456789012);
  CHECK_FALSE(step_of_directory_name("iter_000010"));  // 6 digits
  CHECK_FALSE(step_of_directory_name("iter_0000100.incomplete"));
  CHECK_FALSE(step_of_directory_name("release"));  // Megatron-LM's release checkpoints
  CHECK_FALSE(step_of_directory_name("iter-0000100"));
}
