package v1beta1

// Hub marks v1beta1 as the conversion hub: every other version of
// RedisCluster converts to and from it (controller-runtime's conversion.Hub).
func (*RedisCluster) Hub() {}
