"""eosconnect.cluster"""
