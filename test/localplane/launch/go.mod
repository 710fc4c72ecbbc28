module github.com/redis-operator/redis-operator/test/localplane/launch

go 1.26.0
