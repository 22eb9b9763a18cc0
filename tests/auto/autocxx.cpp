// SPDX-License-Identifier: MIT
/* The C++ part of prog_auto: a function in a namespace, demangled in the report as
 * "demo::ns::work(int)". */
namespace demo {
namespace ns {
__attribute__((noinline)) int work(int i)
{
	return i + 1;
}
} // namespace ns
} // namespace demo

extern "C" int cxx_entry(int p);

extern "C" int cxx_entry(int p)
{
	int s = 0;

	for (int i = 0; i < p; i++)
		s += demo::ns::work(i);
	return s;
}
