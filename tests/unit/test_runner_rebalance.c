/* test_runner_rebalance: placeholder */
#include "test_runner_harness.h"
int main(void) { return rt_main("runner_rebalance", NULL, 0); }
