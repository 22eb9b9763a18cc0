// SPDX-License-Identifier: MIT
/* A short C++ program whose calls are mostly the standard library's templates
 * (std::sort over a vector): demangled names that start with a return type
 * ("void std::__adjust_heap<...>(...)") and live in std:: and __gnu_cxx::. */
#include <algorithm>
#include <cstdio>
#include <vector>

namespace app {
__attribute__((noinline)) std::vector<int> make(int n)
{
	std::vector<int> v;

	for (int i = 0; i < n; i++)
		v.push_back((i * 7919) % n);
	return v;
}

__attribute__((noinline)) long sum(const std::vector<int> &v)
{
	long s = 0;

	for (int x : v)
		s += x;
	return s;
}
} // namespace app

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 100;
	std::vector<int> v = app::make(n);

	std::sort(v.begin(), v.end());
	std::printf("%ld %d\n", app::sum(v), v.empty() ? 0 : v.front());
	return 0;
}
