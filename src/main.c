/* placeholder while the daemon is written */
int main(void) { return 0; }
